package net.javacrumbs.shedlock.core;

/** Stand-in for ShedLock's {@code ExtensibleLockProvider} (a marker: its locks can be extended); never shipped. */
public interface ExtensibleLockProvider extends LockProvider {}
