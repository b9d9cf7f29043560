"""Adapters that bring corrgrpo_core estimators into TRL, verl and OpenRLHF."""
