package vocab

// PrivilegedOpens is what a bundle's agent.allow_privileged opens: not one finding of
// PRIVILEGED_REFUSED but the whole policy, for every service of that bundle. Advice that
// offers the flag says this with it (docs/SECURITY.md, "What it cannot protect against", says
// the same words; a test compares).
const PrivilegedOpens = "privileged containers, every capability, devices, the docker socket, binds of any host path, the host's network, pid and ipc namespaces, subnets and driver options of its own, and every field no one has listed or decided"
