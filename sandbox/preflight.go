package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// CheckTools checks that bwrap is installed and can start a sandbox here,
// as the user the agent would run as (Config.User = ""), with the
// namespaces Run uses. The error says what to install or fix and includes
// bwrap's own message.
func CheckTools() error {
	bwrap, err := bwrapPath()
	if err != nil {
		return err
	}
	id, err := agentIdentity("")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bwrap,
		"--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
		"--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
		"--", "true")
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if id.switchTo {
		cmd.SysProcAttr.Credential = id.credential()
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		hint := "user namespaces may be disabled: check sysctl user.max_user_namespaces (must be > 0) and kernel.unprivileged_userns_clone / kernel.apparmor_restrict_unprivileged_userns where they exist"
		who := ""
		if id.switchTo {
			who = fmt.Sprintf(" as user %s (uid %d)", id.name, id.uid)
		}
		return fmt.Errorf("bwrap cannot start a sandbox%s: %s; %s (reproduce with: bwrap --unshare-all --unshare-user --ro-bind / / true)", who, msg, hint)
	}
	return nil
}
