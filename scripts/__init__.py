"""Helper scripts for setting up, serving and testing the package."""
