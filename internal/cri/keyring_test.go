package cri

import (
	"encoding/base64"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestRepository(t *testing.T) {
	tests := []struct{ image, want string }{
		{"nginx", "docker.io/library/nginx"},
		{"nginx:1.27", "docker.io/library/nginx"},
		{"library/nginx@sha256:abc", "docker.io/library/nginx"},
		{"someone/tool:v1", "docker.io/someone/tool"},
		{"docker.io/nginx", "docker.io/library/nginx"},
		{"index.docker.io/someone/tool", "docker.io/someone/tool"},
		{"localhost/app:dev", "localhost/app"},
		{"localhost:5000/app:dev", "localhost:5000/app"},
		{"registry.example.com:5000/team/app:1.0", "registry.example.com:5000/team/app"},
		{"quay.io/org/tool:v1@sha256:abc", "quay.io/org/tool"},
	}
	for _, tt := range tests {
		if got := repository(tt.image); got != tt.want {
			t.Errorf("repository(%q) = %q, want %q", tt.image, got, tt.want)
		}
	}
}

func TestRegistryMatches(t *testing.T) {
	tests := []struct {
		key, repo string
		want      bool
	}{
		{"registry.example.com", "registry.example.com/team/app", true},
		{"registry.example.com/team", "registry.example.com/team/app", true},
		{"registry.example.com/other", "registry.example.com/team/app", false},
		{"registry.example.com:5000", "registry.example.com/team/app", false},
		{"registry.example.com", "registry.example.com:5000/team/app", false},
		{"registry.example.com:5000", "registry.example.com:5000/team/app", true},
		{"*.example.com", "registry.example.com/team/app", true},
		{"*.example.com", "a.b.example.com/team/app", false},
		{"example.com", "registry.example.com/team/app", false},
		{"docker.io", "docker.io/library/nginx", true},
		{"index.docker.io", "docker.io/library/nginx", false},
	}
	for _, tt := range tests {
		if got := registryMatches(tt.key, tt.repo); got != tt.want {
			t.Errorf("registryMatches(%q, %q) = %v, want %v", tt.key, tt.repo, got, tt.want)
		}
	}
}

func TestKeyringLookup(t *testing.T) {
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	var kr keyring
	err := kr.addSecret(&v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths":{
		"https://index.docker.io/v1/": {"auth": "` + enc("hub:pw") + `"},
		"http://registry.example.com/v2/": {"username": "plain", "password": "p", "auth": "` + enc("fromauth:x") + `"},
		"registry.example.com/team": {"username": "team", "password": "t"},
		"unpadded.example.com": {"auth": "` + base64.RawStdEncoding.EncodeToString([]byte("u:p")) + `"}
	}}`)}})
	if err != nil {
		t.Fatalf("addSecret() error = %v", err)
	}
	users := func(repo string) []string {
		var out []string
		for _, a := range kr.lookup(repo) {
			out = append(out, a.Username+":"+a.Password)
		}
		return out
	}
	tests := []struct {
		repo string
		want []string
	}{
		{"registry.example.com/team/app", []string{"team:t", "fromauth:x"}},
		{"registry.example.com/other", []string{"fromauth:x"}},
		{"docker.io/library/nginx", []string{"hub:pw"}},
		{"unpadded.example.com/x", []string{"u:p"}},
		{"ghcr.io/x/y", nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, users(tt.repo)); diff != "" {
			t.Errorf("lookup(%q) (-want +got):\n%s", tt.repo, diff)
		}
	}
}

func TestKeyringMalformed(t *testing.T) {
	tests := []struct {
		name    string
		secret  *v1.Secret
		wantErr bool
	}{
		{name: "not JSON", secret: &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte("{")}}, wantErr: true},
		{name: "bad auth", secret: &v1.Secret{Type: v1.SecretTypeDockercfg, Data: map[string][]byte{v1.DockerConfigKey: []byte(`{"r.io":{"auth":"!!"}}`)}}, wantErr: true},
		{name: "auth without colon", secret: &v1.Secret{Type: v1.SecretTypeDockercfg, Data: map[string][]byte{v1.DockerConfigKey: []byte(`{"r.io":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("nocolon")) + `"}}`)}}, wantErr: true},
		{name: "opaque secret ignored", secret: &v1.Secret{Type: v1.SecretTypeOpaque, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte("{")}}},
		{name: "wrong key for the type ignored", secret: &v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigKey: []byte("{")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var kr keyring
			if err := kr.addSecret(tt.secret); (err != nil) != tt.wantErr {
				t.Errorf("addSecret() error = %v, want error %v", err, tt.wantErr)
			}
			if got := kr.lookup("r.io/x"); len(got) != 0 {
				t.Errorf("lookup() = %v, want nothing from a malformed or foreign secret", got)
			}
		})
	}
}
