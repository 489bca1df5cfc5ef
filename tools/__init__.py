"""Tools the agents call: plain typed functions whose docstrings the model reads."""
