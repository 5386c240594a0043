package admin

var Families = families
