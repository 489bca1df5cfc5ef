"""Seed 000's small model utilities: a conversation title, related questions, a daily tip."""
