"""Monthly budgets: a spending limit per user, alerts at 50, 80 and 100 %, and an optional hard cap.

Spending is the month's usage as the ledger holds it (``TIME_ZONE`` calendar months; settled every
``BILLING_SETTLE_INTERVAL_S``, so a figure lags by at most that). Every minute ``budgets_check``
compares it with each budget: each threshold crossed alerts once a month (a unique row per user,
month and threshold), and with the hard cap on, reaching 100 % stops the user's running instances,
keeping their disks, and stops again any started while the month is over its budget.

It sits above instances (it stops them) and reads billing's ledger; nothing below imports it.
"""
