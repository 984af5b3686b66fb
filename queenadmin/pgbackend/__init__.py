"""Django's PostgreSQL backend with a cheaper connection health check (see base.py)."""
