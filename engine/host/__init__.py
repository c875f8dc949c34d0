"""The host: `regulator serve`, its loop (routing on append, timed duties, leadership) and the units' door over HTTP."""
