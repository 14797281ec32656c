"""Idempotent creates: a client that retries a POST with the same ``Idempotency-Key`` gets the first
answer back instead of a second machine, volume or order (as Stripe's API does)."""
