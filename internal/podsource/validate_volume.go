package podsource

import (
	"path"
	"reflect"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const fileModeErrorMsg = "must be a number between 0 and 0777 (octal), both inclusive"

// validateVolumes checks every volume and returns them by name (every
// named volume, even an invalid one, so that a broken volume is reported
// once rather than again at each of its mounts).
func validateVolumes(vols []v1.Volume, fp *field.Path) (map[string]*v1.Volume, field.ErrorList) {
	var errs field.ErrorList
	byName := map[string]*v1.Volume{}
	for i := range vols {
		vol := &vols[i]
		vp := fp.Index(i)
		if vol.Name == "" {
			errs = append(errs, field.Required(vp.Child("name"), ""))
		} else {
			errs = append(errs, dnsLabel(vol.Name, vp.Child("name"))...)
		}
		if _, dup := byName[vol.Name]; dup {
			errs = append(errs, field.Duplicate(vp.Child("name"), vol.Name))
		} else {
			byName[vol.Name] = vol
		}
		errs = append(errs, validateVolumeSource(&vol.VolumeSource, vp)...)
	}
	return byName, errs
}

// volumeSources lists the JSON names of the sources a VolumeSource sets:
// emptyDir first (the API server checks it first, so with two sources the
// other is the one reported), then in declaration order. Reflection keeps
// the count right as the API grows new volume types.
func volumeSources(src *v1.VolumeSource) []string {
	var names []string
	if src.EmptyDir != nil {
		names = append(names, "emptyDir")
	}
	rv := reflect.ValueOf(src).Elem()
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		f := rv.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			if name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ","); name != "emptyDir" {
				names = append(names, name)
			}
		}
	}
	return names
}

// validateVolumeSource: exactly one source, and the sources a node can
// judge checked in depth.
func validateVolumeSource(src *v1.VolumeSource, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := volumeSources(src)
	if len(names) == 0 {
		errs = append(errs, field.Required(fp, "must specify a volume type"))
	}
	for _, extra := range names[min(1, len(names)):] {
		errs = append(errs, field.Forbidden(fp.Child(extra), "may not specify more than 1 volume type"))
	}
	if ed := src.EmptyDir; ed != nil {
		p := fp.Child("emptyDir")
		if ed.SizeLimit != nil && ed.SizeLimit.Sign() < 0 {
			errs = append(errs, field.Forbidden(p.Child("sizeLimit"), "SizeLimit field must be a valid resource quantity"))
		}
		// The kubelet refuses to set up an unknown medium; say so early.
		switch m := ed.Medium; {
		case m == v1.StorageMediumDefault, m == v1.StorageMediumMemory, m == v1.StorageMediumHugePages:
		case strings.HasPrefix(string(m), string(v1.StorageMediumHugePagesPrefix)):
			if q, err := resource.ParseQuantity(strings.TrimPrefix(string(m), string(v1.StorageMediumHugePagesPrefix))); err != nil || q.Sign() <= 0 {
				errs = append(errs, field.Invalid(p.Child("medium"), m, "must name a page size, as in HugePages-2Mi"))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("medium"), m,
				[]v1.StorageMedium{v1.StorageMediumDefault, v1.StorageMediumMemory, v1.StorageMediumHugePages, "HugePages-<size>"}))
		}
	}
	if hp := src.HostPath; hp != nil {
		p := fp.Child("hostPath")
		if hp.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		} else {
			errs = append(errs, validateNoBacksteps(hp.Path, p.Child("path"))...)
		}
		if hp.Type != nil {
			switch *hp.Type {
			case v1.HostPathUnset, v1.HostPathDirectoryOrCreate, v1.HostPathDirectory, v1.HostPathFileOrCreate,
				v1.HostPathFile, v1.HostPathSocket, v1.HostPathCharDev, v1.HostPathBlockDev:
			default:
				errs = append(errs, field.NotSupported(p.Child("type"), *hp.Type, []v1.HostPathType{v1.HostPathUnset,
					v1.HostPathBlockDev, v1.HostPathCharDev, v1.HostPathDirectory, v1.HostPathDirectoryOrCreate,
					v1.HostPathFile, v1.HostPathFileOrCreate, v1.HostPathSocket}))
			}
		}
	}
	if s := src.Secret; s != nil {
		errs = append(errs, validateKeyedSource(fp.Child("secret"), "secretName", s.SecretName, s.DefaultMode, s.Items)...)
	}
	if c := src.ConfigMap; c != nil {
		errs = append(errs, validateKeyedSource(fp.Child("configMap"), "name", c.Name, c.DefaultMode, c.Items)...)
	}
	if d := src.DownwardAPI; d != nil {
		p := fp.Child("downwardAPI")
		errs = append(errs, validateMode(d.DefaultMode, p.Child("defaultMode"))...)
		for i := range d.Items {
			errs = append(errs, validateDownwardAPIFile(&d.Items[i], p.Child("items").Index(i))...)
		}
	}
	if pr := src.Projected; pr != nil {
		errs = append(errs, validateProjected(pr, fp.Child("projected"))...)
	}
	if c := src.PersistentVolumeClaim; c != nil && c.ClaimName == "" {
		errs = append(errs, field.Required(fp.Child("persistentVolumeClaim", "claimName"), ""))
	}
	if c := src.CSI; c != nil {
		p := fp.Child("csi", "driver")
		switch {
		case c.Driver == "":
			errs = append(errs, field.Required(p, ""))
		case len(c.Driver) > 63:
			errs = append(errs, field.TooLong(p, "", 63))
		default:
			errs = append(errs, dnsSubdomain(strings.ToLower(c.Driver), p)...)
		}
	}
	if e := src.Ephemeral; e != nil && e.VolumeClaimTemplate == nil {
		errs = append(errs, field.Required(fp.Child("ephemeral", "volumeClaimTemplate"), ""))
	}
	if im := src.Image; im != nil {
		p := fp.Child("image")
		if im.Reference == "" {
			errs = append(errs, field.Required(p.Child("reference"), ""))
		} else if strings.TrimSpace(im.Reference) != im.Reference {
			errs = append(errs, field.Invalid(p.Child("reference"), im.Reference, "must not have leading or trailing whitespace"))
		}
		switch im.PullPolicy {
		case v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
		case "":
			errs = append(errs, field.Required(p.Child("pullPolicy"), ""))
		default:
			errs = append(errs, field.NotSupported(p.Child("pullPolicy"), im.PullPolicy, []v1.PullPolicy{v1.PullAlways, v1.PullIfNotPresent, v1.PullNever}))
		}
	}
	if n := src.NFS; n != nil {
		p := fp.Child("nfs")
		if n.Server == "" {
			errs = append(errs, field.Required(p.Child("server"), ""))
		}
		if n.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		} else if !path.IsAbs(n.Path) {
			errs = append(errs, field.Invalid(p.Child("path"), n.Path, "must be an absolute path"))
		}
	}
	if g := src.GitRepo; g != nil {
		p := fp.Child("gitRepo")
		if g.Repository == "" {
			errs = append(errs, field.Required(p.Child("repository"), ""))
		}
		errs = append(errs, validateLocalDescendingPath(g.Directory, p.Child("directory"))...)
	}
	return errs
}

func validateMode(m *int32, fp *field.Path) field.ErrorList {
	if m != nil && (*m < 0 || *m > 0o777) {
		return field.ErrorList{field.Invalid(fp, *m, fileModeErrorMsg)}
	}
	return nil
}

func validateKeyToPath(kp *v1.KeyToPath, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if kp.Key == "" {
		errs = append(errs, field.Required(fp.Child("key"), ""))
	}
	if kp.Path == "" {
		errs = append(errs, field.Required(fp.Child("path"), ""))
	}
	errs = append(errs, validateLocalNonReservedPath(kp.Path, fp.Child("path"))...)
	return append(errs, validateMode(kp.Mode, fp.Child("mode"))...)
}

func validateDownwardAPIFile(f *v1.DownwardAPIVolumeFile, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if f.Path == "" {
		errs = append(errs, field.Required(fp.Child("path"), ""))
	}
	errs = append(errs, validateLocalNonReservedPath(f.Path, fp.Child("path"))...)
	switch {
	case f.FieldRef != nil:
		errs = append(errs, validateFieldSelector(f.FieldRef, volumeFieldPaths, fp.Child("fieldRef"))...)
		if f.ResourceFieldRef != nil {
			errs = append(errs, field.Invalid(fp, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		}
	case f.ResourceFieldRef != nil:
		errs = append(errs, validateResourceFieldSelector(f.ResourceFieldRef, true, fp.Child("resourceFieldRef"))...)
	default:
		errs = append(errs, field.Required(fp, "one of fieldRef and resourceFieldRef is required"))
	}
	return append(errs, validateMode(f.Mode, fp.Child("mode"))...)
}

func validateProjected(pr *v1.ProjectedVolumeSource, fp *field.Path) field.ErrorList {
	errs := validateMode(pr.DefaultMode, fp.Child("defaultMode"))
	paths := sets.New[string]()
	claimPath := func(p string) {
		if p == "" {
			return
		}
		if paths.Has(p) {
			errs = append(errs, field.Invalid(fp, p, "conflicting duplicate paths"))
		}
		paths.Insert(p)
	}
	for i := range pr.Sources {
		src := &pr.Sources[i]
		sp := fp.Child("sources").Index(i)
		n := 0
		if s := src.Secret; s != nil {
			n++
			if s.Name == "" {
				errs = append(errs, field.Required(sp.Child("secret", "name"), ""))
			}
			for j := range s.Items {
				errs = append(errs, validateKeyToPath(&s.Items[j], sp.Child("secret", "items").Index(j))...)
				claimPath(s.Items[j].Path)
			}
		}
		if c := src.ConfigMap; c != nil {
			n++
			if c.Name == "" {
				errs = append(errs, field.Required(sp.Child("configMap", "name"), ""))
			}
			for j := range c.Items {
				errs = append(errs, validateKeyToPath(&c.Items[j], sp.Child("configMap", "items").Index(j))...)
				claimPath(c.Items[j].Path)
			}
		}
		if d := src.DownwardAPI; d != nil {
			n++
			for j := range d.Items {
				errs = append(errs, validateDownwardAPIFile(&d.Items[j], sp.Child("downwardAPI", "items").Index(j))...)
				claimPath(d.Items[j].Path)
			}
		}
		if t := src.ServiceAccountToken; t != nil {
			n++
			tp := sp.Child("serviceAccountToken")
			if e := t.ExpirationSeconds; e != nil && *e < 10*60 {
				errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), *e, "may not specify a duration less than 10 minutes"))
			} else if e != nil && *e > 1<<32 {
				errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), *e, "may not specify a duration larger than 2^32 seconds"))
			}
			if t.Path == "" {
				errs = append(errs, field.Required(tp.Child("path"), ""))
			} else {
				errs = append(errs, validateLocalNonReservedPath(t.Path, tp.Child("path"))...)
			}
			claimPath(t.Path)
		}
		if b := src.ClusterTrustBundle; b != nil {
			n++
			bp := sp.Child("clusterTrustBundle")
			switch {
			case b.Name != nil && b.SignerName != nil:
				errs = append(errs, field.Invalid(bp, "", "only one of name and signerName may be used"))
			case b.Name == nil && b.SignerName == nil:
				errs = append(errs, field.Required(bp, "either name or signerName must be specified"))
			}
			if b.Path == "" {
				errs = append(errs, field.Required(bp.Child("path"), ""))
			}
			errs = append(errs, validateLocalNonReservedPath(b.Path, bp.Child("path"))...)
			claimPath(b.Path)
		}
		if src.PodCertificate != nil {
			n++
		}
		if n > 1 {
			errs = append(errs, field.Forbidden(sp, "may not specify more than 1 volume type per source"))
		}
	}
	return errs
}

// validateVolumeMounts: each mount names a volume, has a unique mount
// path, and a subPath (or subPathExpr) that stays beneath the volume.
func validateVolumeMounts(c *v1.Container, vols map[string]*v1.Volume, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	mountPaths := sets.New[string]()
	devicePaths := sets.New[string]()
	deviceNames := sets.New[string]()
	for _, d := range c.VolumeDevices {
		devicePaths.Insert(d.DevicePath)
		deviceNames.Insert(d.Name)
	}
	privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
	for i, m := range c.VolumeMounts {
		mp := fp.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(mp.Child("name"), ""))
		}
		vol, ok := vols[m.Name]
		if !ok {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mp.Child("mountPath"), ""))
		}
		if mountPaths.Has(m.MountPath) {
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountPaths.Insert(m.MountPath)
		if deviceNames.Has(m.Name) {
			errs = append(errs, field.Invalid(mp.Child("name"), m.Name, "must not already exist in volumeDevices"))
		}
		if devicePaths.Has(m.MountPath) {
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must not already exist as a path in volumeDevices"))
		}
		if ok && vol.Image != nil && len(m.BindMountOptions) > 0 {
			// subPath is allowed with image volumes since 1.33, as by the
			// API server; bind mount options are not.
			errs = append(errs, field.Invalid(mp.Child("bindMountOptions"), m.BindMountOptions, "bindMountOptions may not be used with image volumes"))
		}
		if m.SubPath != "" {
			errs = append(errs, validateLocalDescendingPath(m.SubPath, mp.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				errs = append(errs, field.Invalid(mp.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			errs = append(errs, validateLocalDescendingPath(m.SubPathExpr, mp.Child("subPathExpr"))...)
		}
		if mprop := m.MountPropagation; mprop != nil {
			switch *mprop {
			case v1.MountPropagationNone, v1.MountPropagationHostToContainer:
			case v1.MountPropagationBidirectional:
				if !privileged {
					errs = append(errs, field.Forbidden(mp.Child("mountPropagation"), "Bidirectional mount propagation is available only to privileged containers"))
				}
			default:
				errs = append(errs, field.NotSupported(mp.Child("mountPropagation"), *mprop, []v1.MountPropagationMode{
					v1.MountPropagationBidirectional, v1.MountPropagationHostToContainer, v1.MountPropagationNone}))
			}
		}
		if rro := m.RecursiveReadOnly; rro != nil {
			rp := mp.Child("recursiveReadOnly")
			switch *rro {
			case v1.RecursiveReadOnlyDisabled:
			case v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyIfPossible:
				if !m.ReadOnly {
					errs = append(errs, field.Forbidden(rp, "may only be specified when readOnly is true"))
				}
				if m.MountPropagation != nil && *m.MountPropagation != v1.MountPropagationNone {
					errs = append(errs, field.Forbidden(rp, "may only be specified when mountPropagation is None or not specified"))
				}
			default:
				errs = append(errs, field.NotSupported(rp, *rro, []v1.RecursiveReadOnlyMode{
					v1.RecursiveReadOnlyDisabled, v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyIfPossible}))
			}
		}
	}
	return errs
}

// validateVolumeDevices: block devices come from claims only.
func validateVolumeDevices(c *v1.Container, vols map[string]*v1.Volume, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	names, paths := sets.New[string](), sets.New[string]()
	mountNames, mountPaths := sets.New[string](), sets.New[string]()
	for _, m := range c.VolumeMounts {
		mountNames.Insert(m.Name)
		mountPaths.Insert(m.MountPath)
	}
	for i, d := range c.VolumeDevices {
		dp := fp.Index(i)
		if d.Name == "" {
			errs = append(errs, field.Required(dp.Child("name"), ""))
		}
		if names.Has(d.Name) {
			errs = append(errs, field.Invalid(dp.Child("name"), d.Name, "must be unique"))
		}
		names.Insert(d.Name)
		if vol, ok := vols[d.Name]; !ok {
			errs = append(errs, field.NotFound(dp.Child("name"), d.Name))
		} else if vol.PersistentVolumeClaim == nil && vol.Ephemeral == nil {
			errs = append(errs, field.Invalid(dp.Child("name"), d.Name, "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode"))
		}
		switch {
		case d.DevicePath == "":
			errs = append(errs, field.Required(dp.Child("devicePath"), ""))
		case paths.Has(d.DevicePath):
			errs = append(errs, field.Invalid(dp.Child("devicePath"), d.DevicePath, "must be unique"))
		case len(validateNoBacksteps(d.DevicePath, dp.Child("devicePath"))) > 0:
			errs = append(errs, field.Invalid(dp.Child("devicePath"), d.DevicePath, "can not contain backsteps ('..')"))
		}
		paths.Insert(d.DevicePath)
		if mountNames.Has(d.Name) {
			errs = append(errs, field.Invalid(dp.Child("name"), d.Name, "must not already exist in volumeMounts"))
		}
		if mountPaths.Has(d.DevicePath) {
			errs = append(errs, field.Invalid(dp.Child("devicePath"), d.DevicePath, "must not already exist as a path in volumeMounts"))
		}
	}
	return errs
}

// validateLocalDescendingPath: relative, and no ".." element.
func validateLocalDescendingPath(p string, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(p) {
		errs = append(errs, field.Invalid(fp, p, "must be a relative path"))
	}
	return append(errs, validateNoBacksteps(p, fp)...)
}

// validateNoBacksteps: no ".." element.
func validateNoBacksteps(p string, fp *field.Path) field.ErrorList {
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return field.ErrorList{field.Invalid(fp, p, "must not contain '..'")}
		}
	}
	return nil
}

// validateLocalNonReservedPath: a local descending path that does not
// start with ".." either (the kubelet's atomic writer owns "..data").
func validateLocalNonReservedPath(p string, fp *field.Path) field.ErrorList {
	errs := validateLocalDescendingPath(p, fp)
	if strings.HasPrefix(p, "..") && !strings.HasPrefix(p, "../") {
		errs = append(errs, field.Invalid(fp, p, "must not start with '..'"))
	}
	return errs
}

// validateKeyedSource checks a secret or configMap volume: the object's
// name (nameField), the default mode and each key-to-path item.
func validateKeyedSource(p *field.Path, nameField, name string, mode *int32, items []v1.KeyToPath) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child(nameField), ""))
	}
	errs = append(errs, validateMode(mode, p.Child("defaultMode"))...)
	for i := range items {
		errs = append(errs, validateKeyToPath(&items[i], p.Child("items").Index(i))...)
	}
	return errs
}
