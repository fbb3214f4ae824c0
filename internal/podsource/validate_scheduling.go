package podsource

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateAffinity checks the syntax of node affinity (judged at
// admission against the node's labels), and of pod (anti-)affinity, which
// a node does not act on but the API server would refuse when malformed.
func validateAffinity(a *v1.Affinity, fp *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		np := fp.Child("nodeAffinity")
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			tp := np.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
			if len(req.NodeSelectorTerms) == 0 {
				errs = append(errs, field.Required(tp, "must have at least one node selector term"))
			}
			for i := range req.NodeSelectorTerms {
				errs = append(errs, validateNodeSelectorTerm(&req.NodeSelectorTerms[i], false, tp.Index(i))...)
			}
		}
		for i, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			pp := np.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			if t.Weight <= 0 || t.Weight > 100 {
				errs = append(errs, field.Invalid(pp.Child("weight"), t.Weight, "must be in the range 1-100"))
			}
			// Invalid label values are tolerated in preferences.
			errs = append(errs, validateNodeSelectorTerm(&t.Preference, true, pp.Child("preference"))...)
		}
	}
	for _, pa := range []struct {
		name     string
		required []v1.PodAffinityTerm
		weighted []v1.WeightedPodAffinityTerm
	}{
		{"podAffinity", podAffinityRequired(a.PodAffinity), podAffinityPreferred(a.PodAffinity)},
		{"podAntiAffinity", podAntiAffinityRequired(a.PodAntiAffinity), podAntiAffinityPreferred(a.PodAntiAffinity)},
	} {
		pp := fp.Child(pa.name)
		for i := range pa.required {
			errs = append(errs, validatePodAffinityTerm(&pa.required[i], pp.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))...)
		}
		for i, w := range pa.weighted {
			wp := pp.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			if w.Weight <= 0 || w.Weight > 100 {
				errs = append(errs, field.Invalid(wp.Child("weight"), w.Weight, "must be in the range 1-100"))
			}
			errs = append(errs, validatePodAffinityTerm(&pa.weighted[i].PodAffinityTerm, wp.Child("podAffinityTerm"))...)
		}
	}
	return errs
}

func podAffinityRequired(a *v1.PodAffinity) []v1.PodAffinityTerm {
	if a == nil {
		return nil
	}
	return a.RequiredDuringSchedulingIgnoredDuringExecution
}

func podAffinityPreferred(a *v1.PodAffinity) []v1.WeightedPodAffinityTerm {
	if a == nil {
		return nil
	}
	return a.PreferredDuringSchedulingIgnoredDuringExecution
}

func podAntiAffinityRequired(a *v1.PodAntiAffinity) []v1.PodAffinityTerm {
	if a == nil {
		return nil
	}
	return a.RequiredDuringSchedulingIgnoredDuringExecution
}

func podAntiAffinityPreferred(a *v1.PodAntiAffinity) []v1.WeightedPodAffinityTerm {
	if a == nil {
		return nil
	}
	return a.PreferredDuringSchedulingIgnoredDuringExecution
}

// validateNodeSelectorTerm: In/NotIn need values, Exists/DoesNotExist
// take none, Gt/Lt exactly one; keys are label names, values label values
// (unless tolerated); matchFields only on metadata.name with one value.
func validateNodeSelectorTerm(t *v1.NodeSelectorTerm, allowInvalidValues bool, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for j, r := range t.MatchExpressions {
		rp := fp.Child("matchExpressions").Index(j)
		switch r.Operator {
		case v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn:
			if len(r.Values) == 0 {
				errs = append(errs, field.Required(rp.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
			}
		case v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist:
			if len(r.Values) > 0 {
				errs = append(errs, field.Forbidden(rp.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
			}
		case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt:
			if len(r.Values) != 1 {
				errs = append(errs, field.Required(rp.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
			}
		default:
			errs = append(errs, field.Invalid(rp.Child("operator"), r.Operator, "not a valid selector operator"))
		}
		errs = append(errs, metavalidation.ValidateLabelName(r.Key, rp.Child("key"))...)
		if !allowInvalidValues {
			for k, v := range r.Values {
				for _, msg := range validation.IsValidLabelValue(v) {
					errs = append(errs, field.Invalid(rp.Child("values").Index(k), v, msg))
				}
			}
		}
	}
	for j, r := range t.MatchFields {
		rp := fp.Child("matchFields").Index(j)
		switch r.Operator {
		case v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn:
			if len(r.Values) != 1 {
				errs = append(errs, field.Required(rp.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
			}
		default:
			errs = append(errs, field.Invalid(rp.Child("operator"), r.Operator, "not a valid selector operator"))
		}
		if r.Key != metav1.ObjectNameField {
			errs = append(errs, field.Invalid(rp.Child("key"), r.Key, "not a valid field selector key"))
			continue
		}
		for k, v := range r.Values {
			for _, msg := range apivalidation.NameIsDNSSubdomain(v, false) {
				errs = append(errs, field.Invalid(rp.Child("values").Index(k), v, msg))
			}
		}
	}
	return errs
}

func validatePodAffinityTerm(t *v1.PodAffinityTerm, fp *field.Path) field.ErrorList {
	opts := metavalidation.LabelSelectorValidationOptions{}
	errs := metavalidation.ValidateLabelSelector(t.LabelSelector, opts, fp.Child("labelSelector"))
	errs = append(errs, metavalidation.ValidateLabelSelector(t.NamespaceSelector, opts, fp.Child("namespaceSelector"))...)
	for _, ns := range t.Namespaces {
		for _, msg := range apivalidation.ValidateNamespaceName(ns, false) {
			errs = append(errs, field.Invalid(fp.Child("namespace"), ns, msg))
		}
	}
	errs = append(errs, validateLabelKeys(t.MatchLabelKeys, t.LabelSelector, fp.Child("matchLabelKeys"))...)
	errs = append(errs, validateLabelKeys(t.MismatchLabelKeys, t.LabelSelector, fp.Child("mismatchLabelKeys"))...)
	mismatch := sets.New(t.MismatchLabelKeys...)
	for i, k := range t.MatchLabelKeys {
		if mismatch.Has(k) {
			errs = append(errs, field.Invalid(fp.Child("matchLabelKeys").Index(i), k, "exists in both matchLabelKeys and mismatchLabelKeys"))
		}
	}
	if t.TopologyKey == "" {
		return append(errs, field.Required(fp.Child("topologyKey"), "can not be empty"))
	}
	return append(errs, metavalidation.ValidateLabelName(t.TopologyKey, fp.Child("topologyKey"))...)
}

// validateLabelKeys checks matchLabelKeys-like lists: label names, and
// only beside a label selector.
func validateLabelKeys(keys []string, sel *metav1.LabelSelector, fp *field.Path) field.ErrorList {
	if len(keys) == 0 {
		return nil
	}
	if sel == nil {
		return field.ErrorList{field.Forbidden(fp, "must not be specified when labelSelector is not set")}
	}
	var errs field.ErrorList
	for i, k := range keys {
		errs = append(errs, metavalidation.ValidateLabelName(k, fp.Index(i))...)
	}
	return errs
}

// validateTolerations: keys are label names; an empty key needs Exists;
// Exists takes no value; tolerationSeconds only with NoExecute.
func validateTolerations(ts []v1.Toleration, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range ts {
		tp := fp.Index(i)
		if t.Key != "" {
			errs = append(errs, metavalidation.ValidateLabelName(t.Key, tp.Child("key"))...)
		}
		if t.Key == "" && t.Operator != v1.TolerationOpExists {
			errs = append(errs, field.Invalid(tp.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != v1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(tp.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case v1.TolerationOpEqual, "":
			if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
				errs = append(errs, field.Invalid(tp.Child("operator"), t.Value, strings.Join(msgs, ";")))
			}
		case v1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(tp.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(tp.Child("operator"), t.Operator, []v1.TolerationOperator{v1.TolerationOpEqual, v1.TolerationOpExists}))
		}
		switch t.Effect {
		case "", v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect,
				[]v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute}))
		}
	}
	return errs
}

// validateTopologySpreadConstraints: maxSkew > 0, a topologyKey,
// whenUnsatisfiable DoNotSchedule or ScheduleAnyway, one constraint per
// (topologyKey, whenUnsatisfiable), minDomains > 0 and only with
// DoNotSchedule, node inclusion policies Honor or Ignore, a valid label
// selector.
func validateTopologySpreadConstraints(cs []v1.TopologySpreadConstraint, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, c := range cs {
		cp := fp.Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(cp.Child("maxSkew"), c.MaxSkew, "must be greater than zero"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(cp.Child("topologyKey"), "can not be empty"))
		} else {
			errs = append(errs, metavalidation.ValidateLabelName(c.TopologyKey, cp.Child("topologyKey"))...)
		}
		switch c.WhenUnsatisfiable {
		case v1.DoNotSchedule, v1.ScheduleAnyway:
		default:
			errs = append(errs, field.NotSupported(cp.Child("whenUnsatisfiable"), c.WhenUnsatisfiable,
				[]v1.UnsatisfiableConstraintAction{v1.DoNotSchedule, v1.ScheduleAnyway}))
		}
		key := c.TopologyKey + "/" + string(c.WhenUnsatisfiable)
		if seen.Has(key) {
			errs = append(errs, field.Duplicate(cp.Child("{topologyKey, whenUnsatisfiable}"), fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)))
		}
		seen.Insert(key)
		if m := c.MinDomains; m != nil {
			if *m <= 0 {
				errs = append(errs, field.Invalid(cp.Child("minDomains"), *m, "must be greater than 0"))
			} else if c.WhenUnsatisfiable != v1.DoNotSchedule {
				errs = append(errs, field.Invalid(cp.Child("minDomains"), *m,
					fmt.Sprintf("can only use minDomains if whenUnsatisfiable=%s, not %s", v1.DoNotSchedule, c.WhenUnsatisfiable)))
			}
		}
		for _, pol := range []struct {
			name string
			v    *v1.NodeInclusionPolicy
		}{{"nodeAffinityPolicy", c.NodeAffinityPolicy}, {"nodeTaintsPolicy", c.NodeTaintsPolicy}} {
			if pol.v != nil && *pol.v != v1.NodeInclusionPolicyHonor && *pol.v != v1.NodeInclusionPolicyIgnore {
				errs = append(errs, field.NotSupported(cp.Child(pol.name), *pol.v,
					[]v1.NodeInclusionPolicy{v1.NodeInclusionPolicyHonor, v1.NodeInclusionPolicyIgnore}))
			}
		}
		errs = append(errs, validateLabelKeys(c.MatchLabelKeys, c.LabelSelector, cp.Child("matchLabelKeys"))...)
		errs = append(errs, metavalidation.ValidateLabelSelector(c.LabelSelector, metavalidation.LabelSelectorValidationOptions{}, cp.Child("labelSelector"))...)
	}
	return errs
}
