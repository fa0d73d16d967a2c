"""Helpers the test tiers share (importable as `support`: tests/conftest.py puts tests/ on
sys.path)."""
