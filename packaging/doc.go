// Package packaging holds the tests of the monky-deployd .deb: the systemd units, the maintainer
// scripts, install.sh and the ansible role, each run against recording stand-ins of the system tools
// in a temporary root. It has no code of its own and must not be imported.
package packaging
