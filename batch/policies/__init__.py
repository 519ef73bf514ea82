"""Pure decisions for a sweep that manages itself: when to halt, a per-model circuit
breaker, concurrency that follows a provider's rate limit, the attempt and spend budgets,
and a deadline.

Each module is plain functions and values over plain data: the clock is a number passed
in, nothing here starts a process or touches a file. They are the cores of issues 13 and
14; the driver applies halt, the breaker and the deadline
(``batch.execution.policy_runtime``), adaptive concurrency (``batch.execution.concurrency``),
the attempt budget (``batch.plan.resume``, ``batch.execution.execute``) and budgets
(``batch.execution.budgets``).
"""
