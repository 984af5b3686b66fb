"""The dashboard's views, one module per page.

Each page's template (``templates/queenadmin/<page>.html``) names its live
regions as partials (django-template-partials), so the full page, an htmx
request and a websocket push render the same HTML (``dashboard/live.py``).
The live pages are listed in ``dashboard/pages.py``; the URLs in
``dashboard/urls.py``.
"""
