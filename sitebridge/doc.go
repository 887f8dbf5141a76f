// Package sitebridge carries one gateway's topics between the Mosquitto on
// its Raspberry Pi and the site's broker: it reads the image card's
// bridge.txt (Parse) and writes the Mosquitto bridge for it (Conf), and the
// lines the site's broker needs in its ACL for the bridge's user (SiteACL).
//
// The bridge carries each topic one way only, as the gateway uses it:
// commands and the gateway's own probe are read, answers, states, status
// and inputs written; only the instance claims go both ways, so that two
// gateways with one id behind two bridges still see each other
// (docs/design.md, "one process per gateway id"). A topic carried both
// ways would bring the site's retained copies of the gateway's own states
// back after every reconnect, older than the Pi's, and the next reconnect
// would send them out again as the newest. docs/site.md says why each
// setting is what it is.
package sitebridge
