"""What a worker does not load until it is used.

mozilla-django-oidc (and requests, which it brings) raised a worker's
memory by about 26 MiB, paid by every deployment; it is imported by the
single sign-on views at their first request (dashboard/urls.py) and by a
logout, not by the URLconf the API's requests load.
"""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

PROBE = """
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "queenadmin.settings")
import django
django.setup()
from django.urls import get_resolver
get_resolver().url_patterns
print(",".join(sorted(m for m in sys.modules if m.startswith("mozilla_django_oidc"))))
"""


def test_the_urlconf_loads_no_single_sign_on_library():
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "", done.stdout
