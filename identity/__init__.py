"""S5: the identity files and the policy files. Pure: no stores, no git."""
