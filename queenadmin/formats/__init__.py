"""Date formats that name their time zone (``FORMAT_MODULE_PATH``).

Django's own English formats show ``Dec. 3, 2026, 8:14 a.m.`` with no zone,
so an admin page cannot tell UTC from local time. These add it (``T``: the
zone's abbreviation, UTC here since ``TIME_ZONE`` is UTC); every other
format stays Django's.
"""
