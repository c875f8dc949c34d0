"""The checkout: finding the workspace and its lease, the governed content in force (authority), git config and HEAD."""
