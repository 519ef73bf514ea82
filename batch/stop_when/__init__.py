"""``stop_when``: stopping a model, or a comparison, once the answer is known (docs/sweep-file.md,
"stop_when"). Pure: the anytime-valid confidence sequence (``confidence_sequence``), the
rules that decide a stop (``rules``), the standing of each model over the finished jobs
(``tracking``) and how many jobs a target likely takes (``estimate``). The key is
``batch.sweep.features.stop_when``; the driver applies it in
``batch.execution.stop_when_runtime``."""
