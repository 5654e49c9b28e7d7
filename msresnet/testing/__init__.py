"""What the chapters and the tests start to run against: a loopback S3 server
(``local_s3``, a moto server on 127.0.0.1 with its settings exported).

Imports nothing: importing the package never loads MindSpore (``tests/test_layers.py``).
"""
