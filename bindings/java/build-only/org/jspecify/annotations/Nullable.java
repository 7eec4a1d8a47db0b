package org.jspecify.annotations;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Build-only stand-in for JSpecify's {@code @Nullable} (org.jspecify:jspecify
 * 1.0.0, the dependency pom.xml declares): same name, documented, kept at run
 * time, a type-use annotation. Written from its documented definition because
 * Maven Central is not reachable where this project builds. build.sh compiles
 * against it and never packages it: the jar refers to the annotation by name
 * only, as a jar built with Maven against the real one does.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE_USE)
public @interface Nullable {}
