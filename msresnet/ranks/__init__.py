"""A data-parallel run's evidence: what each rank saw and computed (``dump``, the
callback a worker adds with ``--rank_dump``) and chapter 7's reading and replay of
those records (``analysis``; no training worker imports it).

Imports nothing: importing the package never loads MindSpore (``tests/test_layers.py``).
"""
