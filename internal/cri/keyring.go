package cri

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/volume"
)

// This file finds the credentials for an image pull, as the kubelet's
// credentialprovider keyring does (pkg/credentialprovider/keyring.go,
// config.go, secrets/secrets.go): those of the pod's imagePullSecrets
// first, then the node-wide ones of the first docker config file found
// (DockerConfigPaths).

// pullCredentials returns the credentials that match image: the pod's
// imagePullSecrets (API Secrets in API mode; files of PullSecretsDir in
// standalone mode), most specific registry path first, then the
// node-wide ones; none when nothing matches (the pull is then
// anonymous). A secret that cannot be read is skipped with a warning and
// a FailedToRetrieveImagePullSecret event, as the kubelet goes on
// without it; so is a malformed one.
func (r *Runtime) pullCredentials(ctx context.Context, p *v1.Pod, image string, log *zap.Logger) []*runtimeapi.AuthConfig {
	repo := repository(image)
	return append(r.secretCredentials(ctx, p, repo, log), r.nodeCredentials(repo, log)...)
}

// secretCredentials returns the credentials of the pod's
// imagePullSecrets that match repo.
func (r *Runtime) secretCredentials(ctx context.Context, p *v1.Pod, repo string, log *zap.Logger) []*runtimeapi.AuthConfig {
	if len(p.Spec.ImagePullSecrets) == 0 {
		return nil
	}
	if r.cfg.Objects == nil && r.cfg.PullSecretsDir == "" {
		log.Warn("imagePullSecrets need an API server or --pull-secrets-dir; pulling without them")
		return nil
	}
	var (
		kr      keyring
		missing []string
	)
	for _, ref := range p.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue // accepted by old API validation; the kubelet ignores it too
		}
		s, err := r.pullSecret(ctx, p.Namespace, ref.Name)
		if err != nil {
			log.Warn("unable to retrieve pull secret; the image pull may not succeed", zap.String("secret", ref.Name), zap.Error(err))
			missing = append(missing, ref.Name)
			continue
		}
		if err := kr.addSecret(s); err != nil {
			log.Warn("ignoring malformed pull secret", zap.String("secret", ref.Name), zap.Error(err))
		}
	}
	if len(missing) > 0 {
		r.event(p, v1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(missing, ", "))
	}
	return kr.lookup(repo)
}

// pullSecret reads an image pull secret: from the API server, or in
// standalone mode from <PullSecretsDir>/<namespace>/<name>, a file in the
// .dockerconfigjson format ({"auths": {...}}, as ~/.docker/config.json).
func (r *Runtime) pullSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	if r.cfg.Objects != nil {
		return r.cfg.Objects.Secret(ctx, namespace, name)
	}
	b, err := os.ReadFile(volume.ChildDir(volume.ChildDir(r.cfg.PullSecretsDir, namespace), name))
	if err != nil {
		return nil, err
	}
	return &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: b}}, nil
}

// DefaultDockerConfigPaths are the node-wide docker config files the
// kubelet reads, in its order: config.json in its root directory, in
// ~/.docker and in /.docker, then the legacy .dockercfg in the root
// directory, in ~ and in /. (The kubelet also looks in its working
// directory; a daemon's is /, or arbitrary: not done.) An empty home is
// skipped.
func DefaultDockerConfigPaths(rootDir, home string) []string {
	jsonDirs, legacyDirs := []string{rootDir}, []string{rootDir}
	if home != "" {
		jsonDirs, legacyDirs = append(jsonDirs, filepath.Join(home, ".docker")), append(legacyDirs, home)
	}
	jsonDirs, legacyDirs = append(jsonDirs, "/.docker"), append(legacyDirs, "/")
	var out []string
	for _, d := range jsonDirs {
		out = append(out, filepath.Join(d, "config.json"))
	}
	for _, d := range legacyDirs {
		out = append(out, filepath.Join(d, ".dockercfg"))
	}
	return out
}

// nodeCredentials returns the credentials for repo of the first of
// DockerConfigPaths that can be read and parsed: config.json files hold
// {"auths": {...}}, others the legacy .dockercfg map. Read at every pull
// (a small local file), so an edit applies to the next pull.
func (r *Runtime) nodeCredentials(repo string, log *zap.Logger) []*runtimeapi.AuthConfig {
	for _, path := range r.cfg.DockerConfigPaths {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := &v1.Secret{Type: v1.SecretTypeDockercfg, Data: map[string][]byte{v1.DockerConfigKey: b}}
		if filepath.Base(path) == "config.json" {
			s = &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: b}}
		}
		var kr keyring
		if err := kr.addSecret(s); err != nil {
			log.Warn("ignoring unreadable node docker config; trying the next", zap.String("file", path), zap.Error(err))
			continue
		}
		return kr.lookup(repo)
	}
	return nil
}

// dockerEntry is one registry's entry of a .dockercfg or of the auths
// of a .dockerconfigjson.
type dockerEntry struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

// keyring indexes credentials by registry key (host[:port][/path]). The
// zero value is empty and ready.
type keyring struct {
	creds map[string][]*runtimeapi.AuthConfig
}

// addSecret adds the entries of a kubernetes.io/dockerconfigjson or
// kubernetes.io/dockercfg secret; a secret of another type adds nothing.
func (k *keyring) addSecret(s *v1.Secret) error {
	var entries map[string]dockerEntry
	switch {
	case s.Type == v1.SecretTypeDockerConfigJson && len(s.Data[v1.DockerConfigJsonKey]) > 0:
		var cfg struct {
			Auths map[string]dockerEntry `json:"auths"`
		}
		if err := json.Unmarshal(s.Data[v1.DockerConfigJsonKey], &cfg); err != nil {
			return fmt.Errorf("parse %s: %w", v1.DockerConfigJsonKey, err)
		}
		entries = cfg.Auths
	case s.Type == v1.SecretTypeDockercfg && len(s.Data[v1.DockerConfigKey]) > 0:
		if err := json.Unmarshal(s.Data[v1.DockerConfigKey], &entries); err != nil {
			return fmt.Errorf("parse %s: %w", v1.DockerConfigKey, err)
		}
	default:
		return nil
	}
	// Sorted: two entries of a secret that map to the same key are
	// tried in a stable order.
	locs := make([]string, 0, len(entries))
	for loc := range entries {
		locs = append(locs, loc)
	}
	sort.Strings(locs)
	var errs []error
	for _, loc := range locs {
		if err := k.add(loc, entries[loc]); err != nil {
			errs = append(errs, fmt.Errorf("entry %q: %w", loc, err))
		}
	}
	return errors.Join(errs...)
}

// add indexes one entry under its registry key: the scheme dropped, and
// a /v1/ or /v2/ path (the Docker Hub's legacy "https://index.docker.io/v1/")
// meaning the host alone.
func (k *keyring) add(loc string, e dockerEntry) error {
	auth := &runtimeapi.AuthConfig{
		Username:      e.Username,
		Password:      e.Password,
		IdentityToken: e.IdentityToken,
		RegistryToken: e.RegistryToken,
	}
	if e.Auth != "" {
		// base64(username:password) wins over the plain fields, as the
		// kubelet decodes it.
		user, pass, err := decodeAuth(e.Auth)
		if err != nil {
			return err
		}
		auth.Username, auth.Password = user, pass
	}
	value := loc
	if !strings.HasPrefix(value, "https://") && !strings.HasPrefix(value, "http://") {
		value = "https://" + value
	}
	u, err := url.Parse(value)
	if err != nil {
		return fmt.Errorf("parse registry: %w", err)
	}
	p := u.Path
	if strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/v2/") {
		p = p[3:]
	}
	key := u.Host
	if p != "" && p != "/" {
		key += p
	}
	if k.creds == nil {
		k.creds = map[string][]*runtimeapi.AuthConfig{}
	}
	k.creds[key] = append(k.creds[key], auth)
	return nil
}

// decodeAuth decodes a docker config "auth" field, padded or not.
func decodeAuth(field string) (user, pass string, err error) {
	enc := base64.RawStdEncoding
	if strings.HasSuffix(strings.TrimSpace(field), "=") {
		enc = base64.StdEncoding
	}
	b, err := enc.DecodeString(strings.TrimSpace(field))
	if err != nil {
		return "", "", fmt.Errorf("decode auth: %w", err)
	}
	user, pass, ok := strings.Cut(string(b), ":")
	if !ok {
		return "", "", errors.New("auth must be base64(username:password)")
	}
	return user, pass, nil
}

// defaultRegistryKey is the Docker Hub's key in docker configs.
const defaultRegistryKey = "index.docker.io"

// lookup returns the credentials whose key matches repo (a normalized
// repository, e.g. docker.io/library/nginx), keys in reverse order so a
// longer path beats its prefix; when none matches and repo is on the
// Docker Hub, those of index.docker.io.
func (k *keyring) lookup(repo string) []*runtimeapi.AuthConfig {
	keys := make([]string, 0, len(k.creds))
	for key := range k.creds {
		keys = append(keys, key)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(keys)))
	var out []*runtimeapi.AuthConfig
	for _, key := range keys {
		if registryMatches(key, repo) {
			out = append(out, k.creds[key]...)
		}
	}
	if len(out) == 0 && onDockerHub(repo) {
		out = k.creds[defaultRegistryKey]
	}
	return out
}

// registryMatches reports whether a key (host[:port][/path], host labels
// may be globs such as *.example.com) covers repo: same port, same number
// of host labels each matching, and the key's path a prefix of repo's
// (the kubelet's URLsMatch).
func registryMatches(key, repo string) bool {
	ku, err := url.Parse("https://" + key)
	if err != nil {
		return false
	}
	ru, err := url.Parse("https://" + repo)
	if err != nil {
		return false
	}
	kHost, kPort := splitHostPort(ku.Host)
	rHost, rPort := splitHostPort(ru.Host)
	if kPort != rPort || len(kHost) != len(rHost) || !strings.HasPrefix(ru.Path, ku.Path) {
		return false
	}
	for i := range kHost {
		if ok, err := filepath.Match(kHost[i], rHost[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

// splitHostPort splits a URL host into its labels and port.
func splitHostPort(hostport string) ([]string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(host, "."), port
}

// onDockerHub reports whether a repository is pulled from the Docker Hub.
func onDockerHub(repo string) bool {
	first, _, found := strings.Cut(repo, "/")
	if first == "" {
		return false
	}
	if !found || first == "docker.io" || first == "index.docker.io" {
		return true
	}
	return !strings.ContainsAny(first, ".:")
}

// repository normalizes an image reference to its repository without tag
// or digest, as the container runtime resolves it: a first element
// without '.' or ':' (and not localhost) is a Docker Hub path,
// index.docker.io is docker.io, and a single-element Hub name is under
// library/ (nginx:1.25 → docker.io/library/nginx).
func repository(image string) string {
	name, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name = name[:i]
	}
	domain, rest := "docker.io", name
	if first, remainder, ok := strings.Cut(name, "/"); ok &&
		(strings.ContainsAny(first, ".:") || first == "localhost" || strings.ToLower(first) != first) {
		domain, rest = first, remainder
	}
	if domain == "index.docker.io" {
		domain = "docker.io"
	}
	if domain == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	return domain + "/" + rest
}
