"""The ground floor: errors and their exit codes, field limits, the clock, ids, text escaping, the host key, SSH signatures. Imports nothing else of engine."""
