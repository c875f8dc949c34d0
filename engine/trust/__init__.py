"""Trust for person actions: which key signs for a person, signed git commits, identity verified from git history."""
