"""Who a person is: a verified mobile number, a real-name identity, and the one trial each may claim.

Sits below billing and instances (they ask it before a trial grant, a paid top-up or a launch) and
above notifications and core; it reads the user model through ``get_user_model`` only.
"""
