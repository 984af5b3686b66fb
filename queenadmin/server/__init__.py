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
- ``middleware``: the body limit, the sync/async middleware base, and the
  inline hooks pops use (the API's error envelope is ``api/envelope.py``).
- ``loops``: the lifespan, which starts the background loops.
- ``logs``: the logging configuration (text or JSON, the access log).
- ``files``: the data folder and its private files.
- ``compat``: every private name of Django, uvicorn, a2wsgi and
  prometheus_client that the above relies on, each behind a function.

This module holds only what the product's views also read.
"""

from __future__ import annotations

#: The ASGI scope key where ``serve``'s protocol (``httpproto``) notes when
#: a request began to arrive (event-loop time); ``handlers.PopHandler``
#: sets it for other servers. A long-poll pop's timeout runs from then.
ARRIVED_KEY = "queenadmin.arrived"
