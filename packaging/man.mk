# make man: regenerate the man page from the command definitions. The shipped agent is built
# with -tags urfave_cli_no_docs and has no `man` command; this is the separate build that keeps
# urfave/cli's docs (ToMan), post-processed into NAME, SYNOPSIS, DESCRIPTION, COMMANDS, EXIT
# STATUS, FILES, ENVIRONMENT and SEE ALSO. The page is committed and shipped in the .deb;
# TestManPageIsGenerated in cmd/monky-deployd fails when it drifts, TestManPageSections when
# groff -ww -man warns.
.PHONY: man
man:
	$(GO) run ./cmd/monky-deployd man > packaging/man/monky-deployd.8.tmp
	mv packaging/man/monky-deployd.8.tmp packaging/man/monky-deployd.8
	groff -ww -man -Tutf8 packaging/man/monky-deployd.8 > /dev/null
