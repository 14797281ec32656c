"""GPU metrics: what each card of each instance does, sampled by the worker, stored compactly, charted.

The worker asks each provider for its running machines' samples every ``METRICS_SAMPLE_INTERVAL_S``
(``metrics.services.metrics_collect``, through the providers' ``GpuMetricsCapability``); pages and
the API read the stored rows (``metrics.selectors``) and never ask a provider. Raw samples are kept
``METRICS_RAW_RETENTION_S``; every ``METRICS_ROLLUP_S`` they are folded into rollups (averages and
peaks per bucket), kept ``METRICS_ROLLUP_RETENTION_DAYS``. Charts up to 6 hours read the raw rows,
a day and a week the rollups (with the raw rows of the last two buckets).
"""
