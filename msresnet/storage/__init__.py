"""Object storage: copying to and from ``obs://``/``s3://`` (fsspec or MoXing), one copy
per node, and the loopback S3 server the chapters and tests use.

Imports nothing: importing the package never loads MindSpore (``tests/test_layers.py``).
"""
