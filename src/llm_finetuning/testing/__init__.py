"""Test helpers that ship with the package (tiny random models for fast, real training tests)."""
