"""Production's settings with MD5 password hashing, for a live server whose
test logs in many times and is about something else than passwords
(``DJANGO_SETTINGS_MODULE=tests.fast_hashing_settings`` in its
environment): PBKDF2 costs about 0.34 s of CPU a login here."""

from __future__ import annotations

from queenadmin.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
