"""The verbs by which backfill starts helper processes of its own (never typed by a person): named here, at the
bottom of the layers, so that the command line recognises them without importing the launchers."""

RUNNER_VERB = "__warm-runner"  # `backfill __warm-runner REQUESTS REPLIES EXECUTOR_PID`: the warm launcher's runner
LOCAL_CLUSTER_VERB = "__local-cluster"  # `backfill __local-cluster N EXECUTOR_PID`: --launcher dask-local:N
