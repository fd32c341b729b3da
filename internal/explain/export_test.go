package explain

// CodesMarkdown exports codesMarkdown to the package's tests.
var CodesMarkdown = codesMarkdown
