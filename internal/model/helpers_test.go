package model

const okCompose = "services:\n  api:\n    image: harbor.tikali.net/monky/api:1\n"
