"""``msresnet doctor``: one machine checked for a profile before a long run (see
:mod:`msresnet.doctor.command`). Imports nothing, as every sub-package."""
