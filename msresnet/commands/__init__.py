"""The verbs of ``msresnet``, each a thin command line over one library function."""
