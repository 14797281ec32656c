"""Your own service ports: HTTP servers a user runs on an instance (TensorBoard on 6006, Gradio on 7860…),
each reached at an owner-only URL through the console's proxy (``/i/<instance>/p<port>/``, HTTP and
WebSocket), and optionally made public by share links (``/i/<instance>/s-<token>/``): random, revocable,
with an optional expiry.
"""
