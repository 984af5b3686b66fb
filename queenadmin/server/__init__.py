"""Everything that serves HTTP, apart from the product's own views.

``manage.py serve`` runs uvicorn with these pieces (``queenadmin/asgi.py``
is the few-line entry point that sets Django up and names the app):

- ``app``: the one ASGI application; routes each request by kind and path
  (plain HTTP to Django's WSGI handler in threads, long-poll pops to an
  async handler, websockets to Channels, the lifespan to ``loops``).
- ``metered``: ``app`` with request counts for ``/metrics``.
- ``httpproto``: uvicorn's HTTP protocol with a deadline on request
  headers, writing each answer's head with its body.
- ``wsgi_bridge``: the body read on the event loop, then Django's WSGI
  handler run with one thread hop per request.
- ``handlers``: the Django handlers ``app`` uses (the API's, the pops',
  the static files') and the one function that builds a middleware chain.
- ``middleware``: the body limit and the inline hooks pops use (the base
  every middleware of ours shares is ``plumbing/middleware.py``, the API's
  error envelope ``api/envelope.py``).
- ``loops``: the lifespan, which starts the background loops.
- ``logs``: the logging configuration (text or JSON, the access log).

The private framework names these rely on, the data folder's files and the
request's arrival stamp (``ARRIVED_KEY``) are on the ground floor,
``queenadmin/plumbing/``: the product's views read them too.
"""

from __future__ import annotations
