"""`python -m settings`: print the reference tables of every environment variable (markdown)."""

from settings.reference import markdown_reference

print(markdown_reference(), end="")
