"""Log a command line in through the browser with a device code (RFC 8628's flow, in the console's API
format): the CLI asks for a code, the user confirms it on a console page while logged in, and the CLI
receives a new API token of that user. No password or token is ever typed into the terminal."""
