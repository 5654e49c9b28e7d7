"""A run's configuration: the profiles, their overrides and checks (``profile``), what
each kind of value must be (``rules``), the profiles side by side (``table``) and a
run's Config built in one place and read back from a run folder (``run``).
"""
