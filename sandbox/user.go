package sandbox

import (
	"fmt"
	"os/user"
	"strconv"
)

func lookupUserName(name string) (identity, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return identity{}, err
	}
	return toIdentity(u)
}

func lookupUserID(uid string) (identity, error) {
	u, err := user.LookupId(uid)
	if err != nil {
		return identity{}, err
	}
	return toIdentity(u)
}

func toIdentity(u *user.User) (identity, error) {
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return identity{}, fmt.Errorf("user %s has non-numeric ids %s:%s", u.Username, u.Uid, u.Gid)
	}
	id := identity{uid: uint32(uid), gid: uint32(gid), name: u.Username}
	// The user's supplementary groups, as a login gives them: without
	// them a file the user reads through a group was unreadable inside.
	if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				id.groups = append(id.groups, uint32(n))
			}
		}
	}
	return id, nil
}
