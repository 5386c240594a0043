package admin

// MethodIndex exports methodIndex to tests.
var MethodIndex, Methods = methodIndex, methods[:]
var Families = families
