from __future__ import annotations

from django.urls import path

from queenadmin.dashboard.views import overview, queues, search

app_name = "dashboard"

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("queues/", queues.queue_list, name="queues"),
    path("queues/<path:name>/dlq/replay/", queues.dlq_replay, name="dlq_replay"),
    path("queues/<path:name>/dlq/purge/", queues.dlq_purge, name="dlq_purge"),
    path("queues/<path:name>/", queues.queue_detail, name="queue"),
    path("search/", search.search_page, name="search"),
]
