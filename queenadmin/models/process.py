"""Process samples: what each serving process measured of itself.

Every worker of ``serve`` writes one row per tick of the statistics
sampler (``metrics.process`` reads, ``domain.procmetrics`` writes); ``/api/v1/analytics/system-metrics``
reads them per replica. Counters are cumulative since the process
started, so a reader takes differences between a process's consecutive
rows. Rows go after ``SAMPLES_FINE_RETENTION_SECONDS``.
"""

from __future__ import annotations

from django.db import models


class ProcessSample(models.Model):
    """One process's reading of itself at ``at``."""

    #: The machine's host name: Queen's replica ``hostname``.
    host = models.CharField(max_length=255)
    #: The port ``serve`` listens on (0 when not known).
    port = models.IntegerField()
    pid = models.IntegerField()
    at = models.DateTimeField()
    #: CPU seconds this process used since it started, in user and kernel mode.
    cpu_user_seconds = models.FloatField()
    cpu_system_seconds = models.FloatField()
    #: Resident and virtual memory now (None where the system does not say).
    rss_bytes = models.BigIntegerField(null=True)
    virtual_bytes = models.BigIntegerField(null=True)
    threads = models.IntegerField()
    #: Requests this process answered since it started, by route class.
    push_requests = models.BigIntegerField()
    pop_requests = models.BigIntegerField()
    ack_requests = models.BigIntegerField()
    requests = models.BigIntegerField()

    class Meta:
        indexes = [models.Index(fields=["at"], name="processsample_at_idx")]

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}@{self.at:%Y-%m-%dT%H:%M:%S}"
