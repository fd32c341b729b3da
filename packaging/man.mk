# make man: regenerate the man page from the command definitions (urfave/cli's ToMan). The page
# is committed and shipped in the .deb; a test in cmd/monky-deployd fails when it drifts.
.PHONY: man
man:
	$(GO) run ./cmd/monky-deployd man > packaging/man/monky-deployd.8.tmp
	mv packaging/man/monky-deployd.8.tmp packaging/man/monky-deployd.8
