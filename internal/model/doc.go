// Package model is the compose model as the agent knows it: the release layout around it
// (<deploy_dir>/releases/<sha> and <deploy_dir>/resolved/<sha>.yaml), the model compose-go
// loads from a release exactly as compose would, its resolved form (the one file every compose
// call runs) and the services the health gate judges. A release's model is loaded only in a
// bounded loader child (internal/budget); nothing here runs docker.
package model
